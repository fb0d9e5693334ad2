/*
 * threads.c - one loaded model shared by several threads, each with its own
 * session, checked against a single-threaded run.
 *
 *   threads MODEL.onnx NAME=FILE.npy
 *   threads models/zoo/llama_dynamo/model.onnx \
 *           input_ids=models/zoo/llama_dynamo/inputs/input_ids.npy
 *
 * The rules this program relies on (docs/api.md, "Threads"):
 *  - a teexec_model is immutable once loaded: any number of threads may
 *    create sessions from it and read it at the same time;
 *  - a teexec_session is used by one thread at a time, so each thread
 *    creates its own (creating one is cheap next to loading the model);
 *  - the model is destroyed only after every session made from it.
 * A CPU session's results do not depend on which thread runs it, so every
 * thread must reproduce the single-threaded outputs bit for bit.
 */
#include <teexec/teexec.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define RUNS_PER_THREAD 3

static int failed(teexec_status *st, const char *what)
{
    if (!st) return 0;
    /* fprintf is thread-safe per call: lines from threads do not mix */
    fprintf(stderr, "threads: %s: %s [%s]\n", what, teexec_status_message(st),
            teexec_code_name(teexec_status_code(st)));
    teexec_status_destroy(st);
    return 1;
}

/* A CPU session with one GEMM thread: the program's own threads supply the
 * parallelism (OpenBLAS's thread count is process-wide, so every session
 * should ask for the same). */
static teexec_status *cpu_session(const teexec_model *model, teexec_session **out)
{
    teexec_session_options *o = NULL;
    teexec_status *st = teexec_session_options_create(&o);
    if (!st) st = teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU);
    if (!st) st = teexec_session_options_set_threads(o, 1);
    if (!st) st = teexec_session_create(model, o, out);
    teexec_session_options_destroy(o);
    return st;
}

/* What the threads share: read-only while they run. */
typedef struct shared {
    const teexec_model *model;
    const char *input_name;
    const teexec_tensor *input;
    size_t n_outputs;
    teexec_tensor **want; /* the single-threaded outputs */
} shared;

/* One per thread; only its own thread writes it. */
typedef struct worker {
    const shared *s;
    int runs_ok, mismatches;
} worker;

static int same_tensor(const teexec_tensor *a, const teexec_tensor *b)
{
    return teexec_tensor_dtype(a) == teexec_tensor_dtype(b) &&
           teexec_tensor_byte_size(a) == teexec_tensor_byte_size(b) &&
           memcmp(teexec_tensor_data_const(a), teexec_tensor_data_const(b),
                  teexec_tensor_byte_size(a)) == 0;
}

static void *work(void *arg)
{
    worker *w = arg;
    const shared *s = w->s;
    teexec_session *session = NULL;
    teexec_tensor **got = calloc(s->n_outputs, sizeof *got);
    if (!got) {
        fprintf(stderr, "threads: out of memory\n");
        return NULL;
    }
    if (failed(cpu_session(s->model, &session), "creating a session")) goto done;
    for (int r = 0; r < RUNS_PER_THREAD; r++) {
        if (failed(teexec_session_run(session, 1, &s->input_name, &s->input, s->n_outputs, NULL,
                                      got),
                   "running"))
            goto done;
        w->runs_ok++;
        for (size_t i = 0; i < s->n_outputs; i++) {
            if (!same_tensor(got[i], s->want[i])) w->mismatches++;
            teexec_tensor_destroy(got[i]);
            got[i] = NULL;
        }
    }
done:
    teexec_session_destroy(session);
    free(got);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || !strchr(argv[2], '=')) {
        fprintf(stderr, "usage: threads MODEL.onnx NAME=FILE.npy\n");
        return 2;
    }
    int rc = 1;
    char *eq = strchr(argv[2], '=');
    *eq = '\0';
    teexec_model *model = NULL;
    teexec_tensor *input = NULL;
    const teexec_tensor *in = NULL;
    teexec_session *session = NULL;
    shared s = {0};
    worker workers[THREADS];
    pthread_t tids[THREADS];
    int started = 0;

    if (failed(teexec_model_load_file(argv[1], NULL, &model), "loading the model") ||
        failed(teexec_tensor_load_file(eq + 1, &input), eq + 1))
        goto done;
    s.model = model;
    s.input_name = argv[2];
    s.input = input;
    s.n_outputs = teexec_model_output_count(model);
    s.want = calloc(s.n_outputs, sizeof *s.want);
    if (!s.want) {
        fprintf(stderr, "threads: out of memory\n");
        goto done;
    }

    /* The reference: one session, one run, on this thread. */
    in = input;
    if (failed(cpu_session(model, &session), "creating a session") ||
        failed(teexec_session_run(session, 1, &s.input_name, &in, s.n_outputs, NULL, s.want),
               "running"))
        goto done;
    teexec_session_destroy(session);
    session = NULL;

    /* THREADS threads over the one model, at the same time. */
    for (; started < THREADS; started++) {
        workers[started] = (worker){&s, 0, 0};
        if (pthread_create(&tids[started], NULL, work, &workers[started]) != 0) {
            fprintf(stderr, "threads: pthread_create failed\n");
            break;
        }
    }
    int runs = 0, mismatches = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
        runs += workers[i].runs_ok;
        mismatches += workers[i].mismatches;
    }
    printf("%d threads x %d runs: %d runs done, %d outputs differ from the single-threaded run\n",
           THREADS, RUNS_PER_THREAD, runs, mismatches);
    rc = started == THREADS && runs == THREADS * RUNS_PER_THREAD && mismatches == 0 ? 0 : 1;

done:
    /* Every session is gone (each thread destroyed its own): now the model. */
    teexec_session_destroy(session);
    for (size_t i = 0; s.want && i < s.n_outputs; i++) teexec_tensor_destroy(s.want[i]);
    free(s.want);
    teexec_tensor_destroy(input);
    teexec_model_destroy(model);
    return rc;
}
