/* test_run_options.c - teexec_run_options on one thread: bad arguments, a
 * run cancelled before it starts (no outputs, sticky until reset), a run
 * cancelled while in flight (the log callback, called on the running thread
 * at the run's start, cancels it: the run stops before a node), the session
 * correct afterwards (bit-identical to a fresh session), the tag on log
 * messages and on a failed run's status, and trainer steps cancelled
 * without touching a parameter, and the per-run profile (set_profile,
 * teexec_session_run_profile): one row per fuser group and standard node
 * run, replaced by the next profiled run only, outputs unchanged. The
 * cross-thread cancel is in test_threads.c (run under ThreadSanitizer).
 * Models: models/mlp, and models/zoo/gpt2_dynamo for the profile. */
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

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static void expect_code(teexec_status *st, teexec_code code, const char *part)
{
    if (!st) fail_msg("expected %s, got success", teexec_code_name(code));
    if (teexec_status_code(st) != code || (part && !strstr(teexec_status_message(st), part)))
        fail_msg("expected %s with \"%s\", got %s: %s", teexec_code_name(code), part ? part : "",
                 teexec_code_name(teexec_status_code(st)), teexec_status_message(st));
    teexec_status_destroy(st);
}

typedef struct fixture {
    teexec_model *model;
    teexec_tensor *x;
} fixture;

static void load_mlp(fixture *f)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[2048];
    snprintf(path, sizeof path, "%s/models/mlp/model.onnx", root ? root : ".");
    ok(teexec_model_load_file(path, NULL, &f->model));
    snprintf(path, sizeof path, "%s/models/mlp/inputs/x.npy", root ? root : ".");
    ok(teexec_tensor_load_file(path, &f->x));
}

static void free_mlp(fixture *f)
{
    teexec_tensor_destroy(f->x);
    teexec_model_destroy(f->model);
}

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

/* One run of the MLP's only input and output. */
static teexec_status *run(teexec_session *s, const teexec_run_options *ro, const teexec_tensor *x,
                          teexec_tensor **out)
{
    const char *name = "x";
    return teexec_session_run_with(s, ro, 1, &name, &x, 1, NULL, out);
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void assert_same_bits(const teexec_tensor *a, const teexec_tensor *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(teexec_tensor_byte_size(a), teexec_tensor_byte_size(b));
    assert_memory_equal(teexec_tensor_data_const(a), teexec_tensor_data_const(b),
                        teexec_tensor_byte_size(a));
}

/* The output of a session that never saw a cancel. */
static teexec_tensor *reference(const fixture *f)
{
    teexec_session *s = cpu_session(f->model);
    teexec_tensor *y = NULL;
    ok(run(s, NULL, f->x, &y));
    teexec_session_destroy(s);
    return y;
}

static void bad_arguments(void **state)
{
    (void)state;
    expect_code(teexec_run_options_create(NULL), TEEXEC_ERR_INVALID_ARGUMENT, "out_options");
    expect_code(teexec_run_options_set_tag(NULL, "a"), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    expect_code(teexec_run_options_cancel(NULL), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    expect_code(teexec_run_options_reset(NULL), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    assert_int_equal(teexec_run_options_is_cancelled(NULL), 0);
    teexec_run_options_destroy(NULL);

    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro));
    char long_tag[300];
    memset(long_tag, 'a', sizeof long_tag - 1);
    long_tag[sizeof long_tag - 1] = 0;
    expect_code(teexec_run_options_set_tag(ro, long_tag), TEEXEC_ERR_INVALID_ARGUMENT,
                "at most 255 bytes");
    long_tag[255] = 0;
    ok(teexec_run_options_set_tag(ro, long_tag));
    ok(teexec_run_options_set_tag(ro, NULL));

    teexec_tensor *out = (teexec_tensor *)&out; /* not NULL: the run must reset it */
    const char *name = "x";
    expect_code(teexec_session_run_with(NULL, ro, 0, NULL, NULL, 1, NULL, &out),
                TEEXEC_ERR_INVALID_ARGUMENT, "session is NULL");
    assert_null(out);
    double loss = 0;
    expect_code(teexec_trainer_step_with(NULL, ro, 1, &name, NULL, &loss),
                TEEXEC_ERR_INVALID_ARGUMENT, "trainer is NULL");
    assert_true(isnan(loss));

    /* cancelled options are checked before the inputs; after a reset the
     * bad input is reported */
    fixture f = {0};
    load_mlp(&f);
    teexec_session *s = cpu_session(f.model);
    ok(teexec_run_options_cancel(ro));
    expect_code(teexec_session_run_with(s, ro, 1, &name, NULL, 0, NULL, NULL),
                TEEXEC_ERR_CANCELLED, "before the run started");
    ok(teexec_run_options_reset(ro));
    expect_code(teexec_session_run_with(s, ro, 1, &name, NULL, 1, NULL, &out),
                TEEXEC_ERR_INVALID_ARGUMENT, "input_names or input_tensors is NULL");
    teexec_session_destroy(s);
    free_mlp(&f);
    teexec_run_options_destroy(ro);
}

static void cancel_before_the_run(void **state)
{
    (void)state;
    assert_string_equal(teexec_code_name(TEEXEC_ERR_CANCELLED), "cancelled");
    fixture f = {0};
    load_mlp(&f);
    teexec_tensor *want = reference(&f);
    teexec_session *s = cpu_session(f.model);
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro));
    assert_int_equal(teexec_run_options_is_cancelled(ro), 0);
    ok(teexec_run_options_cancel(ro));
    assert_int_equal(teexec_run_options_is_cancelled(ro), 1);

    /* nothing is output, and the flag stays set for the next run */
    for (int k = 0; k < 2; k++) {
        teexec_tensor *out = (teexec_tensor *)&out;
        teexec_status *st = run(s, ro, f.x, &out);
        assert_non_null(st);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_CANCELLED);
        assert_non_null(strstr(teexec_status_message(st), "before the run started"));
        assert_null(teexec_status_node(st));
        teexec_status_destroy(st);
        assert_null(out);
    }
    /* reset: the same options serve a normal run; NULL options are plain runs */
    ok(teexec_run_options_reset(ro));
    assert_int_equal(teexec_run_options_is_cancelled(ro), 0);
    teexec_tensor *y = NULL;
    ok(run(s, ro, f.x, &y));
    assert_same_bits(y, want);
    teexec_tensor_destroy(y);
    const char *name = "x";
    const teexec_tensor *in = f.x;
    ok(teexec_session_run(s, 1, &name, &in, 1, NULL, &y));
    assert_same_bits(y, want);
    teexec_tensor_destroy(y);

    teexec_run_options_destroy(ro);
    teexec_session_destroy(s);
    teexec_tensor_destroy(want);
    free_mlp(&f);
}

/* The log: every message kept (DEBUG), and, when `cancel` is set, a cancel
 * of those options as soon as a run or step announces its start. */
typedef struct log_record {
    char text[8][512];
    int n;
    teexec_run_options *cancel;
} log_record;

static void on_log(void *user, teexec_log_level level, const char *message)
{
    (void)level;
    log_record *r = user;
    if (r->n < 8) snprintf(r->text[r->n++], sizeof r->text[0], "%s", message);
    if (r->cancel && (strstr(message, "session run started") || strstr(message, "trainer step started")))
        ok(teexec_run_options_cancel(r->cancel));
}

static void cancel_in_flight_then_correct(void **state)
{
    (void)state;
    fixture f = {0};
    load_mlp(&f);
    teexec_tensor *want = reference(&f);
    teexec_session *s = cpu_session(f.model);
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro));
    log_record rec = {.cancel = ro};
    teexec_set_log_callback(on_log, &rec, TEEXEC_LOG_DEBUG);

    teexec_tensor *out = (teexec_tensor *)&out;
    teexec_status *st = run(s, ro, f.x, &out);
    teexec_set_log_callback(NULL, NULL, TEEXEC_LOG_WARNING);
    assert_non_null(st);
    printf("# %s\n", teexec_status_message(st));
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_CANCELLED);
    /* it started, then stopped at the first node's cancel point */
    assert_non_null(strstr(teexec_status_message(st), "cancelled before node"));
    assert_non_null(teexec_status_node(st));
    teexec_status_destroy(st);
    assert_null(out);
    assert_true(rec.n >= 1);
    assert_non_null(strstr(rec.text[0], "session run started (cpu"));

    /* the session is whole: the next run equals a fresh session's */
    ok(teexec_run_options_reset(ro));
    teexec_tensor *y = NULL;
    ok(run(s, ro, f.x, &y));
    assert_same_bits(y, want);
    teexec_tensor_destroy(y);

    teexec_run_options_destroy(ro);
    teexec_session_destroy(s);
    teexec_tensor_destroy(want);
    free_mlp(&f);
}

static void tag_on_log_and_status(void **state)
{
    (void)state;
    fixture f = {0};
    load_mlp(&f);
    teexec_session *s = cpu_session(f.model);
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro));
    ok(teexec_run_options_set_tag(ro, "req-42"));
    log_record rec = {0};
    teexec_set_log_callback(on_log, &rec, TEEXEC_LOG_DEBUG);

    /* the run's messages carry the tag; an untagged run's do not */
    teexec_tensor *y = NULL;
    ok(run(s, ro, f.x, &y));
    teexec_tensor_destroy(y);
    ok(run(s, NULL, f.x, &y));
    teexec_tensor_destroy(y);
    assert_int_equal(rec.n, 2);
    assert_true(starts_with(rec.text[0], "run \"req-42\": session run started (cpu"));
    assert_true(starts_with(rec.text[1], "session run started (cpu"));

    /* a failed run's status carries it too, cancelled or not */
    ok(teexec_run_options_cancel(ro));
    teexec_status *st = run(s, ro, f.x, &y);
    assert_non_null(st);
    assert_string_equal(teexec_status_message(st),
                        "run \"req-42\": the run was cancelled before the run started");
    teexec_status_destroy(st);
    ok(teexec_run_options_reset(ro));
    const char *bad = "nope";
    st = teexec_session_run_with(s, ro, 1, &bad, (const teexec_tensor *const *)&f.x, 1, NULL, &y);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_true(starts_with(teexec_status_message(st), "run \"req-42\": \"nope\" is not an input"));
    teexec_status_destroy(st);
    /* a tag set to NULL is gone */
    ok(teexec_run_options_set_tag(ro, NULL));
    rec.n = 0;
    ok(run(s, ro, f.x, &y));
    teexec_tensor_destroy(y);
    assert_int_equal(rec.n, 1);
    assert_true(starts_with(rec.text[0], "session run started (cpu"));
    teexec_set_log_callback(NULL, NULL, TEEXEC_LOG_WARNING);

    teexec_run_options_destroy(ro);
    teexec_session_destroy(s);
    free_mlp(&f);
}

/* Every trainable parameter's bytes, concatenated. */
static char *params_bytes(const teexec_trainer *t, size_t *size)
{
    char *all = NULL;
    *size = 0;
    for (size_t i = 0; i < teexec_trainer_param_count(t); i++) {
        teexec_tensor *p = NULL;
        ok(teexec_trainer_param(t, teexec_trainer_param_name(t, i), &p));
        size_t n = teexec_tensor_byte_size(p);
        char *grown = realloc(all, *size + n);
        assert_non_null(grown);
        all = grown;
        memcpy(all + *size, teexec_tensor_data_const(p), n);
        *size += n;
        teexec_tensor_destroy(p);
    }
    return all;
}

static void trainer_step_cancelled_keeps_parameters(void **state)
{
    (void)state;
    fixture f = {0};
    load_mlp(&f);
    teexec_train_options to;
    teexec_train_options_init(&to);
    to.device = TEEXEC_DEVICE_CPU;
    to.optimizer = TEEXEC_OPTIMIZER_SGD;
    to.lr = 0.1;
    teexec_trainer *t = NULL;
    ok(teexec_trainer_create(f.model, &to, &t));
    assert_true(teexec_trainer_param_count(t) > 0);
    int64_t dims[] = {2, 8, 64};
    teexec_tensor *target = NULL;
    ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 3, dims, &target));
    const char *names[] = {"x", "target"};
    const teexec_tensor *tensors[] = {f.x, target};
    size_t n0, n1;
    char *before = params_bytes(t, &n0);

    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro));
    ok(teexec_run_options_set_tag(ro, "step-1"));
    ok(teexec_run_options_cancel(ro));
    double loss = 0;
    expect_code(teexec_trainer_step_with(t, ro, 2, names, tensors, &loss), TEEXEC_ERR_CANCELLED,
                "run \"step-1\": the run was cancelled before the step started");
    assert_true(isnan(loss));

    /* cancelled while in flight (at its start, from the log callback): it
     * stops after the forward, and no parameter moved */
    ok(teexec_run_options_reset(ro));
    log_record rec = {.cancel = ro};
    teexec_set_log_callback(on_log, &rec, TEEXEC_LOG_DEBUG);
    expect_code(teexec_trainer_step_with(t, ro, 2, names, tensors, &loss), TEEXEC_ERR_CANCELLED,
                "cancelled after the forward");
    teexec_set_log_callback(NULL, NULL, TEEXEC_LOG_WARNING);
    assert_true(rec.n >= 1);
    assert_non_null(strstr(rec.text[0], "run \"step-1\": trainer step started"));
    char *after = params_bytes(t, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(after);

    /* after a reset the step runs and changes the parameters */
    ok(teexec_run_options_reset(ro));
    ok(teexec_trainer_step_with(t, ro, 2, names, tensors, &loss));
    assert_false(isnan(loss));
    after = params_bytes(t, &n1);
    assert_int_equal(n0, n1);
    assert_true(memcmp(before, after, n0) != 0);
    free(after);
    free(before);

    teexec_run_options_destroy(ro);
    teexec_tensor_destroy(target);
    teexec_trainer_destroy(t);
    free_mlp(&f);
}

/* Rows of a run profile's table: the lines between the column header and
 * the closing "rows:" line. */
static int profile_rows(const char *text)
{
    const char *p = strstr(text, "\ngroup  pass");
    if (!p) return -1;
    p = strchr(p + 1, '\n');
    int rows = 0;
    while (p && p[1] && strncmp(p + 1, "rows: ", 6) != 0) {
        rows++;
        p = strchr(p + 1, '\n');
    }
    return rows;
}

/* The per-run profile on the CPU. models/mlp plans one fuser group of 7
 * ops: one row, run once. gpt2_dynamo (18 groups, 11 of them standard)
 * gives a row per chain group and per standard node it runs, each named
 * and timed once; a second profiled run replaces the table (calls stay
 * 1); an unprofiled run and a failed profiled run leave it; outputs are
 * bit-identical to unprofiled runs. */
static void per_run_profile(void **state)
{
    (void)state;
    fixture f = {0};
    load_mlp(&f);
    teexec_tensor *want = reference(&f);
    teexec_session *s = cpu_session(f.model);
    char *text = NULL;
    expect_code(teexec_session_run_profile(s, &text), TEEXEC_ERR_INVALID_ARGUMENT,
                "no run of this session has asked for a profile");
    assert_null(text);
    expect_code(teexec_session_run_profile(s, NULL), TEEXEC_ERR_INVALID_ARGUMENT, "out_text");
    expect_code(teexec_session_run_profile(NULL, &text), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    expect_code(teexec_run_options_set_profile(NULL, 1), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro));
    ok(teexec_run_options_set_profile(ro, 1));
    teexec_tensor *y = NULL;
    ok(run(s, ro, f.x, &y));
    assert_same_bits(y, want);
    teexec_tensor_destroy(y);
    ok(teexec_session_run_profile(s, &text));
    fprintf(stderr, "%s", text);
    assert_non_null(strstr(text, "run profile (cpu, wall time of each fuser group"));
    assert_int_equal(profile_rows(text), 1);
    assert_non_null(strstr(text, "fuser group of 7 ops (/ln/LayerNormalization_1..)"));
    assert_non_null(strstr(text, "the run: "));
    teexec_string_free(text);
    /* an unprofiled run and a failed profiled one leave the table */
    ok(run(s, NULL, f.x, &y));
    teexec_tensor_destroy(y);
    const char *bad = "no_such_input";
    expect_code(teexec_session_run_with(s, ro, 1, &bad, (const teexec_tensor *const *)&f.x, 1,
                                        NULL, &y),
                TEEXEC_ERR_INVALID_ARGUMENT, "no_such_input");
    ok(teexec_session_run_profile(s, &text));
    assert_int_equal(profile_rows(text), 1);
    teexec_string_free(text);
    teexec_session_destroy(s);
    teexec_tensor_destroy(want);
    free_mlp(&f);

    /* a model with standard nodes between its groups */
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[2048];
    snprintf(path, sizeof path, "%s/models/zoo/gpt2_dynamo/model.onnx", root ? root : ".");
    teexec_model *m = NULL;
    ok(teexec_model_load_file(path, NULL, &m));
    snprintf(path, sizeof path, "%s/models/zoo/gpt2_dynamo/inputs/input_ids.npy",
             root ? root : ".");
    teexec_tensor *ids = NULL;
    ok(teexec_tensor_load_file(path, &ids));
    s = cpu_session(m);
    const char *in = "input_ids";
    teexec_tensor *plain = NULL, *profiled = NULL;
    ok(teexec_session_run_with(s, NULL, 1, &in, (const teexec_tensor *const *)&ids, 1, NULL,
                               &plain));
    for (int k = 0; k < 2; k++) {
        teexec_tensor_destroy(profiled);
        profiled = NULL;
        ok(teexec_session_run_with(s, ro, 1, &in, (const teexec_tensor *const *)&ids, 1, NULL,
                                   &profiled));
        assert_same_bits(profiled, plain);
        ok(teexec_session_run_profile(s, &text));
        int rows = profile_rows(text);
        if (k == 0) fprintf(stderr, "gpt2_dynamo: %d rows\n%s", rows, text);
        /* 7 chain groups, and at least one row per standard group */
        assert_true(rows >= 18);
        /* each row ran once in this run (the second run replaced the first) */
        for (const char *p = strstr(text, "\ngroup  pass"); (p = strchr(p + 1, '\n'));) {
            if (!p[1] || !strncmp(p + 1, "rows: ", 6)) break;
            /* fixed columns: group 6, pass 4, kernel 60, then calls */
            unsigned long long calls = 0;
            assert_int_equal(sscanf(p + 1 + 6 + 1 + 4 + 1 + 60, "%llu", &calls), 1);
            if (calls != 1) fail_msg("a row ran %llu times in one run: %.80s", calls, p + 1);
        }
        teexec_string_free(text);
    }
    teexec_tensor_destroy(plain);
    teexec_tensor_destroy(profiled);
    teexec_tensor_destroy(ids);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
    teexec_run_options_destroy(ro);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(cancel_before_the_run),
        cmocka_unit_test(cancel_in_flight_then_correct),
        cmocka_unit_test(tag_on_log_and_status),
        cmocka_unit_test(trainer_step_cancelled_keeps_parameters),
        cmocka_unit_test(per_run_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
