/* Tests for sessions: create/run/destroy, per-signature plan cache, the
 * all-at-once unsupported-op report, input checking, folded shape
 * subgraphs, output selection. Models: tests/exec/data (make_test_models.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "teexec/teexec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static teexec_model *load(const char *name)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof(path), "%.3000s/tests/exec/data/%.1000s", root ? root : ".", name);
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) fail_msg("loading %s: %s", path, teexec_status_message(st));
    return m;
}

static teexec_tensor *f32(int32_t rank, const int64_t *dims, const float *v, size_t n)
{
    teexec_tensor *t = NULL;
    teexec_status *st = teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, rank, dims, v,
                                                  n * sizeof(float), &t);
    assert_null(st);
    return t;
}

static void create_run_destroy_and_plan_cache(void **state)
{
    (void)state;
    teexec_model *m = load("add_relu.onnx");
    teexec_session *s = NULL;
    assert_null(teexec_session_create(m, NULL, &s));
    assert_string_equal(teexec_session_device_name(s), "cpu");
    assert_int_equal(teexec_session_plan_count(s), 1); /* planned at creation for N = 1 */

    const char *names[] = {"X"};
    float x2[] = {1, 1, 1, -3, 3, -1};
    int64_t d2[] = {2, 3};
    teexec_tensor *in = f32(2, d2, x2, 6);
    teexec_tensor *out = NULL;
    assert_null(teexec_session_run(s, 1, names, (const teexec_tensor *const *)&in, 1, NULL, &out));
    assert_int_equal(teexec_tensor_rank(out), 2);
    assert_int_equal(teexec_tensor_dims(out)[0], 2);
    const float *y = teexec_tensor_data_const(out);
    float want[] = {2, 0, 1.5f, 0, 1, 0};
    for (int i = 0; i < 6; i++) assert_float_equal(y[i], want[i], 0);
    teexec_tensor_destroy(out);
    assert_int_equal(teexec_session_plan_count(s), 2); /* N = 2 is a new signature */

    /* a third shape plans once more; repeating a shape reuses its plan */
    int64_t d4[] = {4, 3};
    float x4[12] = {0};
    teexec_tensor *in4 = f32(2, d4, x4, 12);
    assert_null(teexec_session_run(s, 1, names, (const teexec_tensor *const *)&in4, 1, NULL, &out));
    assert_int_equal(teexec_tensor_dims(out)[0], 4);
    teexec_tensor_destroy(out);
    assert_int_equal(teexec_session_plan_count(s), 3);
    assert_null(teexec_session_run(s, 1, names, (const teexec_tensor *const *)&in, 1, NULL, &out));
    teexec_tensor_destroy(out);
    assert_null(teexec_session_run(s, 1, names, (const teexec_tensor *const *)&in4, 1, NULL, &out));
    teexec_tensor_destroy(out);
    assert_int_equal(teexec_session_plan_count(s), 3);

    /* the cache is bounded: 40 more signatures keep 32 plans */
    for (int64_t n = 5; n < 45; n++) {
        int64_t dn[] = {n, 3};
        float xs[3 * 45] = {0};
        teexec_tensor *t = f32(2, dn, xs, (size_t)n * 3);
        assert_null(teexec_session_run(s, 1, names, (const teexec_tensor *const *)&t, 1, NULL,
                                       &out));
        assert_int_equal(teexec_tensor_dims(out)[0], n);
        teexec_tensor_destroy(out);
        teexec_tensor_destroy(t);
    }
    assert_int_equal(teexec_session_plan_count(s), 32);

    teexec_tensor_destroy(in);
    teexec_tensor_destroy(in4);
    teexec_session_destroy(s);
    teexec_session_destroy(NULL);
    teexec_model_destroy(m);
}

static void unsupported_ops_listed_at_once(void **state)
{
    (void)state;
    teexec_model *m = load("unsupported.onnx");
    teexec_session *s = (teexec_session *)1;
    teexec_status *st = teexec_session_create(m, NULL, &s);
    assert_null(s);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    const char *msg = teexec_status_message(st);
    assert_non_null(strstr(msg, "unsupported op FooOp (domain \"\", opset 17)"));
    assert_non_null(strstr(msg, "unsupported op BarOp (domain \"\", opset 17)"));
    assert_non_null(strstr(msg, "unsupported op Baz (domain \"com.example\", opset 1)"));
    assert_null(strstr(msg, "Relu"));
    /* FooOp appears twice in the graph but once in the list */
    const char *first = strstr(msg, "FooOp");
    assert_null(strstr(first + 1, "FooOp"));
    teexec_status_destroy(st);
    teexec_model_destroy(m);
}

/* Where no GPU is usable (CI, the development machine), asking for CUDA
 * fails at creation: UNSUPPORTED in a build without the CUDA backend,
 * DEVICE in one with it. */
static void cuda_device_refused_without_a_gpu(void **state)
{
    (void)state;
    teexec_model *m = load("add_relu.onnx");
    teexec_session_options *o = NULL;
    assert_null(teexec_session_options_create(&o));
    assert_null(teexec_session_options_set_device(o, TEEXEC_DEVICE_CUDA));
    teexec_session *s = NULL;
    teexec_status *st = teexec_session_create(m, o, &s);
    if (st || !s) {
        assert_true(teexec_status_code(st) == TEEXEC_ERR_UNSUPPORTED ||
                    teexec_status_code(st) == TEEXEC_ERR_DEVICE);
        assert_non_null(strstr(teexec_status_message(st), "CUDA"));
        assert_null(s);
    } else {
        /* a machine with a GPU */
        assert_string_equal(teexec_session_device_name(s), "cuda");
        teexec_session_destroy(s);
    }
    teexec_status_destroy(st);
    st = teexec_session_options_set_threads(o, -1);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    teexec_session_options_destroy(o);
    teexec_model_destroy(m);
}

static void expect_run_error(teexec_session *s, size_t n, const char **names,
                             teexec_tensor **ins, const char *needle)
{
    teexec_tensor *outs[2] = {(teexec_tensor *)1, (teexec_tensor *)1};
    teexec_status *st =
        teexec_session_run(s, n, names, (const teexec_tensor *const *)ins, 2, NULL, outs);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    if (!strstr(teexec_status_message(st), needle))
        fail_msg("message '%s' lacks '%s'", teexec_status_message(st), needle);
    assert_null(outs[0]);
    assert_null(outs[1]);
    teexec_status_destroy(st);
}

static void bad_inputs_give_clear_errors(void **state)
{
    (void)state;
    teexec_model *m = load("two_inputs.onnx");
    teexec_session_options *o = NULL;
    assert_null(teexec_session_options_create(&o));
    assert_null(teexec_session_options_set_dim(o, "N", 3));
    teexec_session *s = NULL;
    assert_null(teexec_session_create(m, o, &s));
    teexec_session_options_destroy(o);

    int64_t d34[] = {3, 4}, d24[] = {2, 4}, d35[] = {3, 5}, d2[] = {2};
    float z[20] = {0};
    int64_t iv[2] = {5, -7};
    teexec_tensor *a = f32(2, d34, z, 12), *b = f32(2, d34, z, 12);
    teexec_tensor *b2 = f32(2, d24, z, 8), *b5 = f32(2, d35, z, 15), *i = NULL;
    teexec_tensor *wrong_dtype = f32(1, d2, z, 2);
    assert_null(teexec_tensor_create_copy(TEEXEC_DTYPE_INT64, 1, d2, iv, sizeof(iv), &i));

    const char *names[] = {"A", "B", "I"};
    teexec_tensor *ok[] = {a, b, i};
    teexec_tensor *outs[2] = {NULL, NULL};
    assert_null(teexec_session_run(s, 3, names, (const teexec_tensor *const *)ok, 2, NULL, outs));
    assert_int_equal(((const int64_t *)teexec_tensor_data_const(outs[1]))[1], -14);
    teexec_tensor_destroy(outs[0]);
    teexec_tensor_destroy(outs[1]);

    const char *bad_name[] = {"A", "Bee", "I"};
    expect_run_error(s, 3, bad_name, ok, "\"Bee\" is not an input of the model");
    expect_run_error(s, 2, names, ok, "input \"I\" is missing");
    const char *twice[] = {"A", "A", "I"};
    expect_run_error(s, 3, twice, ok, "given twice");
    teexec_tensor *dt[] = {a, b, wrong_dtype};
    expect_run_error(s, 3, names, dt, "input \"I\" is float but the model declares int64");
    teexec_tensor *fixed[] = {a, b5, i};
    expect_run_error(s, 3, names, fixed, "has 5 in dim 1 but the model declares 4");
    teexec_tensor *sym[] = {a, b2, i};
    expect_run_error(s, 3, names, sym, "dim \"N\" is 3 in input \"A\" but 2 in input \"B\"");

    /* outputs chosen by name, in the caller's order */
    const char *want[] = {"J"};
    assert_null(teexec_session_run(s, 3, names, (const teexec_tensor *const *)ok, 1, want, outs));
    assert_int_equal(teexec_tensor_dtype(outs[0]), TEEXEC_DTYPE_INT64);
    teexec_tensor_destroy(outs[0]);
    const char *nope[] = {"Q"};
    teexec_status *st =
        teexec_session_run(s, 3, names, (const teexec_tensor *const *)ok, 1, nope, outs);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "\"Q\" is not an output"));
    teexec_status_destroy(st);

    teexec_tensor_destroy(a);
    teexec_tensor_destroy(b);
    teexec_tensor_destroy(b2);
    teexec_tensor_destroy(b5);
    teexec_tensor_destroy(i);
    teexec_tensor_destroy(wrong_dtype);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

static void shape_subgraph_is_resolved_per_signature(void **state)
{
    (void)state;
    teexec_model *m = load("shape_chain.onnx");
    teexec_session *s = NULL;
    assert_null(teexec_session_create(m, NULL, &s));
    int64_t dims[] = {2, 5, 6};
    float x[60];
    for (int k = 0; k < 60; k++) x[k] = (float)k;
    teexec_tensor *in = f32(3, dims, x, 60);
    const char *names[] = {"X"};
    teexec_tensor *outs[2] = {NULL, NULL};
    assert_null(teexec_session_run(s, 1, names, (const teexec_tensor *const *)&in, 2, NULL, outs));
    int64_t wy[] = {2, 5, 2, 3}, wz[] = {2, 2, 5, 3};
    assert_int_equal(teexec_tensor_rank(outs[0]), 4);
    assert_memory_equal(teexec_tensor_dims(outs[0]), wy, sizeof(wy));
    assert_memory_equal(teexec_tensor_dims(outs[1]), wz, sizeof(wz));
    /* Z[b=1, h=1, s=2, k=0] = X[1, 2, 3] */
    const float *z = teexec_tensor_data_const(outs[1]);
    assert_float_equal(z[((1 * 2 + 1) * 5 + 2) * 3 + 0], x[1 * 30 + 2 * 6 + 3], 0);
    teexec_tensor_destroy(outs[0]);
    teexec_tensor_destroy(outs[1]);
    teexec_tensor_destroy(in);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

static void tensor_api(void **state)
{
    (void)state;
    int64_t dims[] = {2, 2};
    float v[] = {1, 2, 3, 4};
    teexec_tensor *t = NULL;
    teexec_status *st = teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, dims, v, 12, &t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_null(t);
    teexec_status_destroy(st);
    assert_null(teexec_tensor_create_borrowed(TEEXEC_DTYPE_FLOAT, 2, dims, v, 16, &t));
    assert_ptr_equal(teexec_tensor_data(t), v);
    assert_int_equal(teexec_tensor_byte_size(t), 16);
    teexec_tensor *h = NULL;
    assert_null(teexec_tensor_cast(t, TEEXEC_DTYPE_FLOAT16, &h));
    assert_int_equal(((const uint16_t *)teexec_tensor_data_const(h))[3], 0x4400); /* 4.0 */
    teexec_tensor_destroy(h);
    teexec_tensor_destroy(t);
    teexec_tensor_destroy(NULL);
    assert_null(teexec_tensor_create(TEEXEC_DTYPE_BOOL, 0, NULL, &t));
    assert_int_equal(teexec_tensor_element_count(t), 1);
    teexec_tensor_destroy(t);
    st = teexec_tensor_load_file("/nonexistent/x.npy", &t);
    assert_int_not_equal(teexec_status_code(st), TEEXEC_OK);
    assert_null(t);
    teexec_status_destroy(st);
}

/* Per-opset semantics (attributes that became inputs, Split-18's
 * num_outputs, Softmax-11's 2-D coercion, data-dependent shapes from
 * constant inputs): each data/variants/NAME.onnx runs on NAME.in<i>.npy and
 * must give NAME.out<j>.npy (made with NumPy by make_test_models.py). */
static void opset_variants_match_numpy(void **state)
{
    (void)state;
    static const char *const names[] = {"reducemean18", "reducemax11", "split18", "split11",
                                         "softmax11", "logsoftmax11", "clip6", "clip13",
                                         "slice9", "squeeze11", "range_expand_tile", "gelu20"};
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        char path[4096];
        snprintf(path, sizeof(path), "variants/%s.onnx", names[k]);
        teexec_model *m = load(path);
        teexec_session *s = NULL;
        teexec_status *st = teexec_session_create(m, NULL, &s);
        if (st) fail_msg("%s: %s", names[k], teexec_status_message(st));
        size_t n_in = teexec_model_input_count(m), n_out = teexec_model_output_count(m);
        teexec_tensor *ins[4] = {NULL}, *outs[4] = {NULL};
        const char *in_names[4];
        assert_true(n_in <= 4 && n_out <= 4);
        for (size_t i = 0; i < n_in; i++) {
            snprintf(path, sizeof(path), "%s/tests/exec/data/variants/%s.in%zu.npy",
                     root ? root : ".", names[k], i);
            assert_null(teexec_tensor_load_file(path, &ins[i]));
            in_names[i] = teexec_model_input(m, i)->name;
        }
        st = teexec_session_run(s, n_in, in_names, (const teexec_tensor *const *)ins, n_out, NULL,
                                outs);
        if (st) fail_msg("%s: %s", names[k], teexec_status_message(st));
        for (size_t j = 0; j < n_out; j++) {
            snprintf(path, sizeof(path), "%s/tests/exec/data/variants/%s.out%zu.npy",
                     root ? root : ".", names[k], j);
            teexec_tensor *want = NULL;
            assert_null(teexec_tensor_load_file(path, &want));
            assert_int_equal(teexec_tensor_dtype(outs[j]), teexec_tensor_dtype(want));
            assert_int_equal(teexec_tensor_rank(outs[j]), teexec_tensor_rank(want));
            assert_memory_equal(teexec_tensor_dims(outs[j]), teexec_tensor_dims(want),
                                (size_t)teexec_tensor_rank(want) * sizeof(int64_t));
            const float *a = teexec_tensor_data_const(outs[j]);
            const float *b = teexec_tensor_data_const(want);
            for (uint64_t e = 0; e < teexec_tensor_element_count(want); e++)
                if (!(fabsf(a[e] - b[e]) <= 1e-6f + 1e-5f * fabsf(b[e])))
                    fail_msg("%s output %zu element %llu: %g, expected %g", names[k], j,
                             (unsigned long long)e, (double)a[e], (double)b[e]);
            teexec_tensor_destroy(want);
            teexec_tensor_destroy(outs[j]);
        }
        for (size_t i = 0; i < n_in; i++) teexec_tensor_destroy(ins[i]);
        teexec_session_destroy(s);
        teexec_model_destroy(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_run_destroy_and_plan_cache),
        cmocka_unit_test(unsupported_ops_listed_at_once),
        cmocka_unit_test(cuda_device_refused_without_a_gpu),
        cmocka_unit_test(bad_inputs_give_clear_errors),
        cmocka_unit_test(shape_subgraph_is_resolved_per_signature),
        cmocka_unit_test(tensor_api),
        cmocka_unit_test(opset_variants_match_numpy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
