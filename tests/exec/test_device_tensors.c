/* test_device_tensors.c - device tensors and the CUDA run options on any
 * machine (the GPU side is tests/gpu/test_gpu_device_io): creating one
 * without a usable device fails cleanly; every host-only path (CPU
 * session runs, trainers, save, cast) refuses one by name, and the
 * session keeps working; teexec_session_run_into with host tensors and
 * its refusals; the run options' setters and their refusals. A
 * "device" tensor here is the internal wrapper over a fake address that
 * nothing may read (tx_tensor_to_public_device with no free). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec/cuda/cuda_executor.h"
#include "exec/tensor_internal.h"
#include "teexec/teexec.h"

#include <math.h>
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

static teexec_model *load(const char *name)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/exec/data/%s", root ? root : ".", name);
    teexec_model *m = NULL;
    ok(teexec_model_load_file(path, NULL, &m));
    return m;
}

/* A session of m on the CPU. */
static teexec_session *cpu_session(const teexec_model *m)
{
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o));
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    teexec_session *s = NULL;
    ok(teexec_session_create(m, o, &s));
    teexec_session_options_destroy(o);
    return s;
}

/* A device tensor over an address nothing dereferences (the refusals come
 * before any read). */
static teexec_tensor *fake_device(teexec_dtype dt, int32_t rank, const int64_t *dims)
{
    static char never_read[1 << 12];
    tx_tensor t;
    ok(tx_tensor_wrap(&t, dt, rank, dims, never_read));
    teexec_tensor *p = NULL;
    ok(tx_tensor_to_public_device(&t, 0, NULL, &p));
    return p;
}

static void test_create_without_a_device(void **state)
{
    (void)state;
    if (tx_gpu_available()) skip(); /* the GPU suite covers it there */
    int64_t dims[2] = {2, 3};
    teexec_tensor *t = (teexec_tensor *)1;
    teexec_status *st = teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, dims, &t);
    assert_non_null(st);
    assert_true(teexec_status_code(st) == TEEXEC_ERR_UNSUPPORTED ||
                teexec_status_code(st) == TEEXEC_ERR_DEVICE);
    teexec_status_destroy(st);
    assert_null(t);
    float host[6];
    t = (teexec_tensor *)1;
    st = teexec_tensor_create_device_borrowed(TEEXEC_DTYPE_FLOAT, 2, dims, host, sizeof host, &t);
    assert_non_null(st);
    teexec_status_destroy(st);
    assert_null(t);
    /* argument checks come first, on any machine */
    expect(teexec_tensor_create_device_borrowed(TEEXEC_DTYPE_FLOAT, 2, dims, NULL, 24, &t),
           TEEXEC_ERR_INVALID_ARGUMENT, "device_data is NULL");
    expect(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, NULL, &t),
           TEEXEC_ERR_INVALID_ARGUMENT, "dims is NULL");
    expect(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, dims, NULL),
           TEEXEC_ERR_INVALID_ARGUMENT, "out_tensor");
}

static void test_host_tensor_reads_as_host(void **state)
{
    (void)state;
    int64_t dims[1] = {3};
    float v[3] = {1, 2, 3};
    teexec_tensor *t = NULL, *c = NULL;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 1, dims, v, sizeof v, &t));
    assert_int_equal(teexec_tensor_device(t), TEEXEC_DEVICE_CPU);
    ok(teexec_tensor_to_host(t, &c));
    assert_int_equal(teexec_tensor_device(c), TEEXEC_DEVICE_CPU);
    assert_memory_equal(teexec_tensor_data_const(c), v, sizeof v);
    assert_ptr_not_equal(teexec_tensor_data_const(c), teexec_tensor_data_const(t));
    teexec_tensor_destroy(c);
    teexec_tensor_destroy(t);
    expect(teexec_tensor_to_host(NULL, &c), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
}

static void test_host_paths_refuse_device_tensors(void **state)
{
    (void)state;
    teexec_model *m = load("add_relu.onnx");
    const teexec_value_info *in0 = teexec_model_input(m, 0);
    assert_non_null(in0);
    /* a device tensor of exactly the input's type: only where it lives is wrong */
    int64_t dims[8];
    for (int32_t d = 0; d < in0->rank; d++) dims[d] = in0->dims[d] > 0 ? in0->dims[d] : 1;
    teexec_tensor *dev = fake_device(in0->dtype, in0->rank, dims);
    assert_int_equal(teexec_tensor_device(dev), TEEXEC_DEVICE_CUDA);
    teexec_session *s = cpu_session(m);
    size_t n_in = teexec_model_input_count(m);
    assert_true(n_in >= 1 && n_in <= 4);
    const char *names[4];
    const teexec_tensor *ins[4];
    teexec_tensor *host[4];
    for (size_t i = 0; i < n_in; i++) {
        const teexec_value_info *vi = teexec_model_input(m, i);
        int64_t hd[8];
        for (int32_t d = 0; d < vi->rank; d++) hd[d] = vi->dims[d] > 0 ? vi->dims[d] : 1;
        ok(teexec_tensor_create(vi->dtype, vi->rank, hd, &host[i]));
        names[i] = vi->name;
        ins[i] = host[i];
    }
    ins[0] = dev;
    teexec_tensor *out = (teexec_tensor *)1;
    char part[300];
    snprintf(part, sizeof part, "input \"%s\" is a CUDA device tensor", in0->name);
    expect(teexec_session_run(s, n_in, names, ins, 1, NULL, &out), TEEXEC_ERR_INVALID_ARGUMENT,
           part);
    assert_null(out);
    /* the session still runs host tensors */
    ins[0] = host[0];
    size_t n_out = teexec_model_output_count(m);
    teexec_tensor *outs[4] = {0};
    assert_true(n_out >= 1 && n_out <= 4);
    ok(teexec_session_run(s, n_in, names, ins, n_out, NULL, outs));
    for (size_t j = 0; j < n_out; j++) {
        assert_int_equal(teexec_tensor_device(outs[j]), TEEXEC_DEVICE_CPU);
        teexec_tensor_destroy(outs[j]);
    }
    /* device outputs are for CUDA sessions; the other CUDA settings are
     * ignored by a CPU run (it returns finished) */
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro));
    ok(teexec_run_options_set_device_outputs(ro, 1));
    expect(teexec_session_run_with(s, ro, n_in, names, ins, n_out, NULL, outs),
           TEEXEC_ERR_INVALID_ARGUMENT, "need a CUDA session");
    for (size_t j = 0; j < n_out; j++) assert_null(outs[j]);
    ok(teexec_run_options_set_device_outputs(ro, 0));
    ok(teexec_run_options_set_no_sync(ro, 1));
    ok(teexec_run_options_set_cuda_stream(ro, (void *)0x1234)); /* never touched on the CPU */
    ok(teexec_session_run_with(s, ro, n_in, names, ins, n_out, NULL, outs));
    for (size_t j = 0; j < n_out; j++) teexec_tensor_destroy(outs[j]);
    ok(teexec_session_wait(s));
    teexec_run_options_destroy(ro);
    /* save and cast read host memory */
    expect(teexec_tensor_save_file(dev, "never_written.npy", NULL), TEEXEC_ERR_INVALID_ARGUMENT,
           "CUDA device tensor");
    teexec_tensor *c = (teexec_tensor *)1;
    expect(teexec_tensor_cast(dev, TEEXEC_DTYPE_FLOAT16, &c), TEEXEC_ERR_INVALID_ARGUMENT,
           "CUDA device tensor");
    assert_null(c);
    teexec_session_destroy(s);
    for (size_t i = 0; i < n_in; i++) teexec_tensor_destroy(host[i]);
    teexec_tensor_destroy(dev); /* borrowed: frees nothing */
    teexec_model_destroy(m);
}

/* teexec_session_run_into on the CPU: outputs written into the caller's
 * host tensors equal a plain run's, NULL entries get new tensors; every bad
 * binding is refused by name before any output is written (the first,
 * valid, binding keeps its sentinel), and the session keeps working. */
static void test_run_into_host_tensors(void **state)
{
    (void)state;
    teexec_model *m = load("two_inputs.onnx"); /* A, B [N,4] f32, I [2] i64 -> Y = A+B, J */
    teexec_session *s = cpu_session(m);
    const int64_t d34[2] = {3, 4}, d44[2] = {4, 4}, d2[1] = {2};
    float a[12], b[12];
    for (int i = 0; i < 12; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = (float)(12 - i);
    }
    const int64_t iv[2] = {7, -3};
    teexec_tensor *ta = NULL, *tb = NULL, *ti = NULL;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, d34, a, sizeof a, &ta));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, d34, b, sizeof b, &tb));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_INT64, 1, d2, iv, sizeof iv, &ti));
    const char *in_names[3] = {"A", "B", "I"}, *out_names[2] = {"Y", "J"};
    const teexec_tensor *ins[3] = {ta, tb, ti};
    teexec_tensor *plain[2] = {0};
    ok(teexec_session_run(s, 3, in_names, ins, 2, out_names, plain));

    teexec_tensor *y = NULL, *j = NULL, *y_wide = NULL, *y_half = NULL;
    ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 2, d34, &y));
    ok(teexec_tensor_create(TEEXEC_DTYPE_INT64, 1, d2, &j));
    ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 2, d44, &y_wide));
    ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT16, 2, d34, &y_half));
    teexec_tensor *bind[2] = {y, j};
    ok(teexec_session_run_into(s, NULL, 3, in_names, ins, 2, out_names, bind));
    assert_memory_equal(teexec_tensor_data_const(y), teexec_tensor_data_const(plain[0]), sizeof a);
    assert_memory_equal(teexec_tensor_data_const(j), teexec_tensor_data_const(plain[1]), sizeof iv);

    /* refusals: J stays as the sentinel, the output before the bad one */
    int64_t *jd = teexec_tensor_data(j);
    jd[0] = jd[1] = 99;
    teexec_tensor *wrong[2] = {j, y_wide};
    const char *swapped[2] = {"J", "Y"};
    expect(teexec_session_run_into(s, NULL, 3, in_names, ins, 2, swapped, wrong),
           TEEXEC_ERR_INVALID_ARGUMENT, "output \"Y\" has shape [3,4]; its bound tensor is [4,4]");
    wrong[1] = y_half;
    expect(teexec_session_run_into(s, NULL, 3, in_names, ins, 2, swapped, wrong),
           TEEXEC_ERR_INVALID_ARGUMENT, "its bound tensor is float16");
    assert_int_equal(jd[0], 99);
    assert_int_equal(jd[1], 99);
    wrong[1] = j;
    expect(teexec_session_run_into(s, NULL, 3, in_names, ins, 2, swapped, wrong),
           TEEXEC_ERR_INVALID_ARGUMENT, "bound to the same tensor");
    const char *twice[2] = {"Y", "Y"};
    teexec_tensor *two[2] = {y, y_wide};
    expect(teexec_session_run_into(s, NULL, 3, in_names, ins, 2, twice, two),
           TEEXEC_ERR_INVALID_ARGUMENT, "asked for twice and bound");
    teexec_tensor *dev = fake_device(TEEXEC_DTYPE_FLOAT, 2, d34);
    teexec_tensor *on_dev[1] = {dev};
    /* a device tensor cannot be bound on a CPU session */
    expect(teexec_session_run_into(s, NULL, 3, in_names, ins, 1, out_names, on_dev),
           TEEXEC_ERR_INVALID_ARGUMENT, "runs on the CPU and writes host tensors only");
    expect(teexec_session_run_into(s, NULL, 3, in_names, ins, 1, out_names, NULL),
           TEEXEC_ERR_INVALID_ARGUMENT, "outputs is NULL");
    expect(teexec_session_run_into(NULL, NULL, 3, in_names, ins, 1, out_names, bind),
           TEEXEC_ERR_INVALID_ARGUMENT, "session is NULL");

    /* an unbound (NULL) entry gets a new tensor beside a bound one */
    memset(teexec_tensor_data(y), 0, sizeof a);
    teexec_tensor *mixed[2] = {y, NULL};
    ok(teexec_session_run_into(s, NULL, 3, in_names, ins, 2, out_names, mixed));
    assert_ptr_equal(mixed[0], y);
    assert_non_null(mixed[1]);
    assert_memory_equal(teexec_tensor_data_const(y), teexec_tensor_data_const(plain[0]), sizeof a);
    assert_memory_equal(teexec_tensor_data_const(mixed[1]), teexec_tensor_data_const(plain[1]),
                        sizeof iv);
    teexec_tensor_destroy(mixed[1]);
    /* a failed run leaves the unbound entry NULL */
    teexec_tensor *fail_mix[2] = {y_wide, NULL};
    expect(teexec_session_run_into(s, NULL, 3, in_names, ins, 2, out_names, fail_mix),
           TEEXEC_ERR_INVALID_ARGUMENT, "has shape");
    assert_null(fail_mix[1]);
    /* and the session still runs, into the same tensors */
    memset(teexec_tensor_data(y), 0, sizeof a);
    ok(teexec_session_run_into(s, NULL, 3, in_names, ins, 2, out_names, bind));
    assert_memory_equal(teexec_tensor_data_const(y), teexec_tensor_data_const(plain[0]), sizeof a);
    assert_memory_equal(teexec_tensor_data_const(j), teexec_tensor_data_const(plain[1]), sizeof iv);

    teexec_tensor_destroy(dev);
    teexec_tensor_destroy(y);
    teexec_tensor_destroy(j);
    teexec_tensor_destroy(y_wide);
    teexec_tensor_destroy(y_half);
    for (int k = 0; k < 2; k++) teexec_tensor_destroy(plain[k]);
    teexec_tensor_destroy(ta);
    teexec_tensor_destroy(tb);
    teexec_tensor_destroy(ti);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

static void test_trainer_refuses_device_tensors(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/mlp/model.onnx", root ? root : ".");
    teexec_model *m = NULL;
    ok(teexec_model_load_file(path, NULL, &m));
    teexec_train_options to;
    teexec_train_options_init(&to);
    to.device = TEEXEC_DEVICE_CPU;
    teexec_trainer *t = NULL;
    ok(teexec_trainer_create(m, &to, &t));
    int64_t dims[3] = {2, 8, 64};
    teexec_tensor *x = fake_device(TEEXEC_DTYPE_FLOAT, 3, dims), *y = NULL;
    ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 3, dims, &y));
    const char *names[2] = {teexec_model_input(m, 0)->name, "target"};
    const teexec_tensor *ts[2] = {x, y};
    double loss = 0;
    expect(teexec_trainer_step(t, 2, names, ts, &loss), TEEXEC_ERR_INVALID_ARGUMENT,
           "CUDA device tensor");
    assert_true(isnan(loss));
    teexec_tensor_destroy(x);
    teexec_tensor_destroy(y);
    teexec_trainer_destroy(t);
    teexec_model_destroy(m);
}

static void test_run_option_setters(void **state)
{
    (void)state;
    expect(teexec_run_options_set_cuda_stream(NULL, NULL), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    expect(teexec_run_options_set_device_outputs(NULL, 1), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    expect(teexec_run_options_set_no_sync(NULL, 1), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    expect(teexec_session_wait(NULL), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    assert_int_equal(teexec_tensor_device(NULL), TEEXEC_DEVICE_CPU);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_without_a_device),
        cmocka_unit_test(test_host_tensor_reads_as_host),
        cmocka_unit_test(test_host_paths_refuse_device_tensors),
        cmocka_unit_test(test_run_into_host_tensors),
        cmocka_unit_test(test_trainer_refuses_device_tensors),
        cmocka_unit_test(test_run_option_setters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
