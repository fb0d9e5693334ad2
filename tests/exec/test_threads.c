/* test_threads.c - a teexec_model is immutable after load and shared: N
 * threads, each with its own CPU session (and, in one case, its own
 * trainer) over ONE loaded model, run it at the same time and get outputs
 * bit-identical to a single-threaded run. Built and run under
 * ThreadSanitizer by scripts/test (build/tsan), so a data race on the
 * model, the prepared copy or a shared table fails CI. Also: a run
 * cancelled from another thread while in flight (run options). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define RUNS 3

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

typedef struct shared {
    const teexec_model *model;
    const char *input_name;
    const teexec_tensor *input;
    const teexec_tensor *want;   /* single-threaded output */
    int mismatches, failures;    /* per thread, written by its own thread only */
} shared;

typedef struct job {
    shared *s;
    int mismatches, failures;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    const shared *s = j->s;
    teexec_session_options *o = NULL;
    teexec_session *sess = NULL;
    teexec_status *st = teexec_session_options_create(&o);
    if (!st) st = teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU);
    if (!st) st = teexec_session_options_set_threads(o, 1);
    if (!st) st = teexec_session_create(s->model, o, &sess);
    teexec_session_options_destroy(o);
    for (int r = 0; r < RUNS && !st; r++) {
        teexec_tensor *out = NULL;
        st = teexec_session_run(sess, 1, &s->input_name, &s->input, 1, NULL, &out);
        if (!st && (teexec_tensor_byte_size(out) != teexec_tensor_byte_size(s->want) ||
                    memcmp(teexec_tensor_data_const(out), teexec_tensor_data_const(s->want),
                           teexec_tensor_byte_size(out)) != 0))
            j->mismatches++;
        teexec_tensor_destroy(out);
    }
    if (st) {
        j->failures++;
        teexec_status_destroy(st);
    }
    teexec_session_destroy(sess);
    return NULL;
}

static void check_model(const char *rel, const char *input, const char *input_file)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    teexec_model *m = NULL;
    ok(teexec_model_load_file(path, NULL, &m));
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", input_file);
    teexec_tensor *x = NULL;
    ok(teexec_tensor_load_file(path, &x));

    /* the single-threaded reference */
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o));
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    ok(teexec_session_options_set_threads(o, 1));
    teexec_session *s0 = NULL;
    ok(teexec_session_create(m, o, &s0));
    teexec_session_options_destroy(o);
    teexec_tensor *want = NULL;
    const teexec_tensor *in = x;
    ok(teexec_session_run(s0, 1, &input, &in, 1, NULL, &want));
    teexec_session_destroy(s0);

    shared sh = {m, input, x, want, 0, 0};
    pthread_t th[THREADS];
    job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (job){&sh, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    }
    int bad = 0, failed = 0;
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        bad += jobs[i].mismatches;
        failed += jobs[i].failures;
    }
    printf("# %s: %d threads x %d runs, %d mismatches, %d failures\n", rel, THREADS, RUNS, bad,
           failed);
    assert_int_equal(failed, 0);
    assert_int_equal(bad, 0);
    teexec_tensor_destroy(want);
    teexec_tensor_destroy(x);
    teexec_model_destroy(m);
}

static void test_gpt2_block(void **state)
{
    (void)state;
    check_model("models/gpt2_block/model.onnx", "x", "models/gpt2_block/inputs/x.npy");
}

static void test_zoo_llama(void **state)
{
    (void)state;
    check_model("models/zoo/llama_dynamo/model.onnx", "input_ids",
                "models/zoo/llama_dynamo/inputs/input_ids.npy");
}

/* Planning and converting the shared model from several threads while
 * sessions run: teexec_model_plan reads the model only. */
static void *planner(void *arg)
{
    const teexec_model *m = arg;
    for (int r = 0; r < RUNS; r++) {
        char *text = NULL;
        teexec_status *st = teexec_model_plan(m, NULL, TEEXEC_PLAN_EXPLAIN, &text);
        teexec_status_destroy(st);
        teexec_string_free(text);
    }
    return NULL;
}

static void test_plan_while_running(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[2048];
    snprintf(path, sizeof path, "%s/models/zoo/gpt2_dynamo/model.onnx", root ? root : ".");
    teexec_model *m = NULL;
    ok(teexec_model_load_file(path, NULL, &m));
    snprintf(path, sizeof path, "%s/models/zoo/gpt2_dynamo/inputs/input_ids.npy", root ? root : ".");
    teexec_tensor *x = NULL;
    ok(teexec_tensor_load_file(path, &x));
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o));
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    teexec_session *s0 = NULL;
    ok(teexec_session_create(m, o, &s0));
    teexec_session_options_destroy(o);
    teexec_tensor *want = NULL;
    const char *name = "input_ids";
    const teexec_tensor *in = x;
    ok(teexec_session_run(s0, 1, &name, &in, 1, NULL, &want));
    teexec_session_destroy(s0);
    shared sh = {m, name, x, want, 0, 0};
    pthread_t th[3], pl;
    job jobs[3];
    assert_int_equal(pthread_create(&pl, NULL, planner, m), 0);
    for (int i = 0; i < 3; i++) {
        jobs[i] = (job){&sh, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    }
    assert_int_equal(pthread_join(pl, NULL), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(jobs[i].failures, 0);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    teexec_tensor_destroy(want);
    teexec_tensor_destroy(x);
    teexec_model_destroy(m);
}

/* Cancelling a run in flight from another thread. The runner's log
 * callback, called on the running thread when the run starts, hands over
 * to the canceller and waits until it has cancelled: the cancel lands
 * while the run is in flight on every schedule, so the test is
 * deterministic (and the flag crosses threads, which TSan checks). */
typedef struct handover {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, cancelled;
    teexec_run_options *ro;
} handover;

static void on_run_start(void *user, teexec_log_level level, const char *message)
{
    (void)level;
    handover *h = user;
    if (!strstr(message, "run \"cancel-me\": session run started")) return;
    pthread_mutex_lock(&h->mu);
    h->started = 1;
    pthread_cond_broadcast(&h->cv);
    while (!h->cancelled) pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void *canceller(void *arg)
{
    handover *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->started) pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    teexec_status *st = teexec_run_options_cancel(h->ro);
    pthread_mutex_lock(&h->mu);
    h->cancelled = st ? -1 : 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    teexec_status_destroy(st);
    return NULL;
}

static void test_cancel_from_another_thread(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[2048];
    snprintf(path, sizeof path, "%s/models/gpt2_block/model.onnx", root ? root : ".");
    teexec_model *m = NULL;
    ok(teexec_model_load_file(path, NULL, &m));
    snprintf(path, sizeof path, "%s/models/gpt2_block/inputs/x.npy", root ? root : ".");
    teexec_tensor *x = NULL;
    ok(teexec_tensor_load_file(path, &x));
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o));
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    ok(teexec_session_options_set_threads(o, 1));
    teexec_session *fresh = NULL, *s = NULL;
    ok(teexec_session_create(m, o, &fresh));
    ok(teexec_session_create(m, o, &s));
    teexec_session_options_destroy(o);
    const char *name = "x";
    const teexec_tensor *in = x;
    teexec_tensor *want = NULL;
    ok(teexec_session_run(fresh, 1, &name, &in, 1, NULL, &want));
    teexec_session_destroy(fresh);

    handover h = {.started = 0, .cancelled = 0};
    assert_int_equal(pthread_mutex_init(&h.mu, NULL), 0);
    assert_int_equal(pthread_cond_init(&h.cv, NULL), 0);
    ok(teexec_run_options_create(&h.ro));
    ok(teexec_run_options_set_tag(h.ro, "cancel-me"));
    teexec_set_log_callback(on_run_start, &h, TEEXEC_LOG_DEBUG);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, canceller, &h), 0);
    teexec_tensor *out = NULL;
    teexec_status *st = teexec_session_run_with(s, h.ro, 1, &name, &in, 1, NULL, &out);
    assert_int_equal(pthread_join(th, NULL), 0);
    teexec_set_log_callback(NULL, NULL, TEEXEC_LOG_WARNING);
    assert_int_equal(h.cancelled, 1);
    assert_non_null(st);
    printf("# %s\n", teexec_status_message(st));
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_CANCELLED);
    assert_non_null(strstr(teexec_status_message(st), "run \"cancel-me\": the run was cancelled "
                                                      "before node"));
    assert_non_null(teexec_status_node(st));
    teexec_status_destroy(st);
    assert_null(out);

    /* reset from here (another thread than the canceller): the session's
     * next runs equal a fresh session's bit for bit */
    ok(teexec_run_options_reset(h.ro));
    for (int r = 0; r < 2; r++) {
        ok(teexec_session_run_with(s, h.ro, 1, &name, &in, 1, NULL, &out));
        assert_int_equal(teexec_tensor_byte_size(out), teexec_tensor_byte_size(want));
        assert_memory_equal(teexec_tensor_data_const(out), teexec_tensor_data_const(want),
                            teexec_tensor_byte_size(want));
        teexec_tensor_destroy(out);
    }
    teexec_run_options_destroy(h.ro);
    pthread_cond_destroy(&h.cv);
    pthread_mutex_destroy(&h.mu);
    teexec_session_destroy(s);
    teexec_tensor_destroy(want);
    teexec_tensor_destroy(x);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_block),
        cmocka_unit_test(test_zoo_llama),
        cmocka_unit_test(test_plan_while_running),
        cmocka_unit_test(test_cancel_from_another_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
