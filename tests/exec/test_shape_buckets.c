/* test_shape_buckets.c - shape buckets (exec/shape_buckets.h and the
 * session options set_dim_multiple / set_dim_buckets): rounding, the
 * padding and cutting of tensors, and a CPU session over variable batch
 * sizes giving the unbucketed session's outputs bit for bit with one plan
 * per bucket, refusing a size over its largest bucket and running on; and
 * 50 random (batch, sequence) shapes through buckets in both dims. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec/shape_buckets.h"
#include "teexec/teexec.h"
#include "tests/import/model_builder.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "unexpected: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static void expect(teexec_status *st, teexec_code code, const char *part)
{
    if (!st) fail_msg("expected %s, got success", teexec_code_name(code));
    if (teexec_status_code(st) != code || (part && !strstr(teexec_status_message(st), part)))
        fail_msg("expected %s with \"%s\", got %s: %s", teexec_code_name(code), part ? part : "",
                 teexec_code_name(teexec_status_code(st)), teexec_status_message(st));
    teexec_status_destroy(st);
}

static int64_t rounded(const tx_buckets *b, const char *name, int64_t v)
{
    int64_t r = -1;
    ok(tx_buckets_round(b, name, v, &r));
    return r;
}

static void test_rounding(void **state)
{
    (void)state;
    tx_buckets b = {0};
    ok(tx_buckets_set_multiple(&b, "batch", 8));
    const int64_t sizes[] = {512, 128, 128, 32};
    ok(tx_buckets_set_sizes(&b, "seq", sizes, 4));
    assert_int_equal(rounded(&b, "batch", 1), 8);
    assert_int_equal(rounded(&b, "batch", 8), 8);
    assert_int_equal(rounded(&b, "batch", 9), 16);
    assert_int_equal(rounded(&b, "batch", 0), 0); /* empty stays empty */
    assert_int_equal(rounded(&b, "seq", 1), 32);
    assert_int_equal(rounded(&b, "seq", 33), 128);
    assert_int_equal(rounded(&b, "seq", 512), 512);
    assert_int_equal(rounded(&b, "other", 7), 7);
    assert_int_equal(rounded(&b, NULL, 7), 7);
    int64_t r = 0;
    expect(tx_buckets_round(&b, "seq", 513, &r), TEEXEC_ERR_INVALID_ARGUMENT,
           "dim \"seq\" is 513, over its largest bucket 512");
    expect(tx_buckets_round(&b, "batch", INT64_MAX - 1, &r), TEEXEC_ERR_INVALID_ARGUMENT,
           "too large");
    /* replacing, copying, refusing */
    ok(tx_buckets_set_multiple(&b, "seq", 64));
    assert_int_equal(b.n, 2);
    assert_int_equal(rounded(&b, "seq", 600), 640);
    tx_buckets c;
    ok(tx_buckets_copy(&b, &c));
    assert_int_equal(rounded(&c, "seq", 1), 64);
    assert_int_equal(rounded(&c, "batch", 3), 8);
    tx_buckets_free(&c);
    expect(tx_buckets_set_multiple(&b, "x", 0), TEEXEC_ERR_INVALID_ARGUMENT, "positive");
    expect(tx_buckets_set_sizes(&b, "x", sizes, 0), TEEXEC_ERR_INVALID_ARGUMENT, "1 to 64");
    const int64_t bad[] = {4, -1};
    expect(tx_buckets_set_sizes(&b, "x", bad, 2), TEEXEC_ERR_INVALID_ARGUMENT, "not positive");
    expect(tx_buckets_set_multiple(&b, "", 2), TEEXEC_ERR_INVALID_ARGUMENT, "empty");
    tx_buckets_free(&b);
}

static void test_pad_and_cut(void **state)
{
    (void)state;
    int64_t dims[3] = {2, 3, 2};
    tx_tensor t, p, c;
    ok(tx_tensor_alloc(&t, TEEXEC_DTYPE_INT32, 3, dims));
    int32_t *v = t.data;
    for (int i = 0; i < 12; i++) v[i] = i + 1;
    /* the middle dim 3 -> 5: each outer row keeps its 3x2 block, then zeros */
    ok(tx_tensor_pad_dim(&t, 1, 5, &p));
    assert_int_equal(p.dims[1], 5);
    assert_int_equal(p.numel, 20);
    const int32_t want[20] = {1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0};
    assert_memory_equal(p.data, want, sizeof want);
    ok(tx_tensor_cut_dim(&p, 1, 3, &c));
    assert_int_equal(c.numel, 12);
    assert_memory_equal(c.data, t.data, 12 * sizeof(int32_t));
    tx_tensor_release(&c);
    tx_tensor_release(&p);
    /* the first and the last dim */
    ok(tx_tensor_pad_dim(&t, 0, 3, &p));
    assert_memory_equal(p.data, t.data, 12 * sizeof(int32_t));
    for (int i = 12; i < 18; i++) assert_int_equal(((int32_t *)p.data)[i], 0);
    tx_tensor_release(&p);
    ok(tx_tensor_cut_dim(&t, 2, 1, &c));
    const int32_t first[6] = {1, 3, 5, 7, 9, 11};
    assert_memory_equal(c.data, first, sizeof first);
    tx_tensor_release(&c);
    tx_tensor pbad;
    expect(tx_tensor_pad_dim(&t, 1, 2, &pbad), TEEXEC_ERR_INTERNAL, NULL);
    expect(tx_tensor_cut_dim(&t, 1, 4, &pbad), TEEXEC_ERR_INTERNAL, NULL);
    expect(tx_tensor_cut_dim(&t, 3, 1, &pbad), TEEXEC_ERR_INTERNAL, NULL);
    tx_tensor_release(&t);
}

/* The model built in m, loaded (the builder's memory freed). */
static teexec_model *load_built(Onnx__ModelProto *m)
{
    size_t size = 0;
    uint8_t *buf = mb_pack(m, &size);
    mb_free_all();
    teexec_model *model = NULL;
    ok(teexec_model_load_memory(buf, size, NULL, NULL, &model));
    free(buf);
    return model;
}

/* y = Relu(x + b), x [N, 4]: rows are independent, so padding N is exact. */
static teexec_model *row_model(void)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph("rows");
    m->graph = g;
    mb_input(g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "N,4");
    mb_output(g, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "N,4");
    const int64_t bd[1] = {4};
    mb_init(g, "b", bd, 1); /* 0, 1, 2, 3 */
    mb_node(g, "add", "Add", NULL, "x,b", "s");
    mb_node(g, "relu", "Relu", NULL, "s", "y");
    return load_built(m);
}

/* y = Relu(x W + b), x [B, S, 4]: every (b, s) row is independent, so
 * padding B and S is exact. */
static teexec_model *token_model(void)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph("tokens");
    m->graph = g;
    mb_input(g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "B,S,4");
    mb_output(g, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "B,S,4");
    const int64_t wd[2] = {4, 4}, bd[1] = {4};
    mb_init(g, "w", wd, 2);
    mb_init(g, "b", bd, 1);
    mb_node(g, "mm", "MatMul", NULL, "x,w", "h");
    mb_node(g, "add", "Add", NULL, "h,b", "s");
    mb_node(g, "relu", "Relu", NULL, "s", "y");
    return load_built(m);
}

static teexec_session *cpu_session(const teexec_model *m, int64_t multiple, const int64_t *sizes,
                                   size_t n_sizes)
{
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o));
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    if (multiple) ok(teexec_session_options_set_dim_multiple(o, "N", multiple));
    if (n_sizes) ok(teexec_session_options_set_dim_buckets(o, "N", sizes, n_sizes));
    teexec_session *s = NULL;
    ok(teexec_session_create(m, o, &s));
    teexec_session_options_destroy(o);
    return s;
}

static teexec_status *run_rows(teexec_session *s, int64_t n, teexec_tensor **y)
{
    int64_t dims[2] = {n, 4};
    teexec_tensor *x = NULL;
    ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 2, dims, &x));
    float *v = teexec_tensor_data(x);
    for (int64_t i = 0; i < n * 4; i++) v[i] = (float)((i * 7) % 11) - 5.0f + 0.25f;
    const char *in[1] = {"x"};
    const teexec_tensor *ins[1] = {x};
    teexec_status *st = teexec_session_run(s, 1, in, ins, 1, NULL, y);
    teexec_tensor_destroy(x);
    return st;
}

static void test_session_over_variable_batches(void **state)
{
    (void)state;
    teexec_model *m = row_model();
    teexec_session *plain = cpu_session(m, 0, NULL, 0);
    teexec_session *b4 = cpu_session(m, 4, NULL, 0);
    /* created at N = 1: planned at its bucket, 4 */
    assert_int_equal(teexec_session_plan_count(b4), 1);
    for (int64_t n = 1; n <= 9; n++) {
        teexec_tensor *want = NULL, *got = NULL;
        ok(run_rows(plain, n, &want));
        ok(run_rows(b4, n, &got));
        assert_int_equal(teexec_tensor_rank(got), 2);
        assert_int_equal(teexec_tensor_dims(got)[0], n);
        assert_int_equal(teexec_tensor_dims(got)[1], 4);
        assert_int_equal(teexec_tensor_byte_size(got), teexec_tensor_byte_size(want));
        assert_memory_equal(teexec_tensor_data_const(got), teexec_tensor_data_const(want),
                            teexec_tensor_byte_size(want));
        teexec_tensor_destroy(want);
        teexec_tensor_destroy(got);
    }
    /* 9 sizes, 3 buckets (4, 8, 12); the plain session planned each size */
    assert_int_equal(teexec_session_plan_count(b4), 3);
    assert_int_equal(teexec_session_plan_count(plain), 9);
    /* listed sizes: over the largest is refused, the session runs on */
    const int64_t sizes[] = {8, 2};
    teexec_session *bl = cpu_session(m, 0, sizes, 2);
    teexec_tensor *y = NULL;
    expect(run_rows(bl, 9, &y), TEEXEC_ERR_INVALID_ARGUMENT, "over its largest bucket 8");
    assert_null(y);
    ok(run_rows(bl, 3, &y));
    assert_int_equal(teexec_tensor_dims(y)[0], 3);
    teexec_tensor_destroy(y);
    ok(run_rows(bl, 1, &y));
    teexec_tensor_destroy(y);
    /* bucket 2 (the declared N=1's, and N=1's run) and bucket 8 (N=3) */
    assert_int_equal(teexec_session_plan_count(bl), 2);
    teexec_session_destroy(bl);
    teexec_session_destroy(b4);
    teexec_session_destroy(plain);
    teexec_model_destroy(m);
}

/* Variable traffic in two dims: 50 seeded random (B, S) shapes, B in
 * [1, 16] bucketed to multiples of 4, S in [1, 32] to the listed 8, 16,
 * 32: each output equals a fresh unbucketed session's at that shape bit
 * for bit, and the session holds one plan per bucket pair it met. */
static void test_two_dims_of_random_traffic(void **state)
{
    (void)state;
    teexec_model *m = token_model();
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o));
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    ok(teexec_session_options_set_dim_multiple(o, "B", 4));
    const int64_t seq_sizes[] = {16, 8, 32};
    ok(teexec_session_options_set_dim_buckets(o, "S", seq_sizes, 3));
    teexec_session *s = NULL;
    ok(teexec_session_create(m, o, &s));
    teexec_session_options_destroy(o);
    bool seen[4][3] = {{false}};
    seen[0][0] = true; /* created at B = S = 1: bucket (4, 8) */
    uint32_t rng = 12345u;
    for (int i = 0; i < 50; i++) {
        rng = rng * 1664525u + 1013904223u;
        int64_t b = 1 + (int64_t)((rng >> 8) % 16u);
        rng = rng * 1664525u + 1013904223u;
        int64_t sq = 1 + (int64_t)((rng >> 8) % 32u);
        seen[(b - 1) / 4][sq <= 8 ? 0 : sq <= 16 ? 1 : 2] = true;
        int64_t dims[3] = {b, sq, 4};
        teexec_tensor *x = NULL;
        ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 3, dims, &x));
        float *v = teexec_tensor_data(x);
        for (int64_t k = 0; k < b * sq * 4; k++) v[k] = (float)((k * 13 + i) % 17) * 0.125f - 1.0f;
        const char *in[1] = {"x"};
        const teexec_tensor *ins[1] = {x};
        teexec_session *fresh = cpu_session(m, 0, NULL, 0);
        teexec_tensor *want = NULL, *got = NULL;
        ok(teexec_session_run(fresh, 1, in, ins, 1, NULL, &want));
        ok(teexec_session_run(s, 1, in, ins, 1, NULL, &got));
        assert_int_equal(teexec_tensor_rank(got), 3);
        assert_int_equal(teexec_tensor_dims(got)[0], b);
        assert_int_equal(teexec_tensor_dims(got)[1], sq);
        assert_int_equal(teexec_tensor_byte_size(got), teexec_tensor_byte_size(want));
        assert_memory_equal(teexec_tensor_data_const(got), teexec_tensor_data_const(want),
                            teexec_tensor_byte_size(want));
        teexec_tensor_destroy(want);
        teexec_tensor_destroy(got);
        teexec_tensor_destroy(x);
        teexec_session_destroy(fresh);
    }
    size_t pairs = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) pairs += seen[i][j];
    print_message("50 shapes: %zu bucket pairs met, %zu plans\n", pairs,
                  teexec_session_plan_count(s));
    assert_int_equal(teexec_session_plan_count(s), pairs);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

static void test_option_refusals(void **state)
{
    (void)state;
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o));
    expect(teexec_session_options_set_dim_multiple(o, "N", -2), TEEXEC_ERR_INVALID_ARGUMENT,
           "positive");
    expect(teexec_session_options_set_dim_buckets(o, "N", NULL, 3), TEEXEC_ERR_INVALID_ARGUMENT,
           NULL);
    expect(teexec_session_options_set_dim_multiple(NULL, "N", 2), TEEXEC_ERR_INVALID_ARGUMENT,
           NULL);
    expect(teexec_session_options_set_dim_multiple(o, NULL, 2), TEEXEC_ERR_INVALID_ARGUMENT,
           NULL);
    teexec_session_options_destroy(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_pad_and_cut),
        cmocka_unit_test(test_session_over_variable_batches),
        cmocka_unit_test(test_two_dims_of_random_traffic),
        cmocka_unit_test(test_option_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
