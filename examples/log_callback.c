/*
 * log_callback.c - what a program learns when something goes wrong: the
 * status of a failed call (code, message, file, node) and the log callback.
 *
 *   log_callback MODEL.onnx
 *   log_callback models/zoo/gpt2_dynamo/model.onnx
 *
 * MODEL.onnx is a token model: its first input holds int64 token ids. The
 * program makes three mistakes on purpose and prints what each status says:
 *   1. loading a file that does not exist       (an I/O error naming the file)
 *   2. giving a float tensor for the token ids  (a bad argument, before any work)
 *   3. giving a token id past the vocabulary    (caught by the node that reads it)
 * It exits 0 when every status carried what it should.
 *
 * Errors always come back as statuses; the log callback carries extra
 * detail the caller did not ask for (today, at the debug level: the start of
 * each run that got past its input checks, and CUDA GEMM tuning choices;
 * with a run tag from teexec_run_options, each tagged with its run). The
 * library never prints.
 */
#include <teexec/teexec.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The callback may be called from any thread that uses the library, so a
 * real one must be thread-safe; this program has one thread. */
static void on_log(void *user_data, teexec_log_level level, const char *message)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    int *count = user_data;
    (*count)++;
    fprintf(stderr, "teexec %s: %s\n", level <= TEEXEC_LOG_DEBUG ? names[level] : "?", message);
}

/* Prints everything a status says; NULL (success) prints as "ok". Takes
 * ownership of the status and returns its code. */
static teexec_code report(const char *what, teexec_status *st, int want_file, int want_node,
                          int *bad)
{
    teexec_code code = teexec_status_code(st);
    printf("%s:\n  code    %d (%s)\n  message %s\n  file    %s\n  node    %s\n", what, (int)code,
           teexec_code_name(code), teexec_status_message(st),
           teexec_status_file(st) ? teexec_status_file(st) : "(none)",
           teexec_status_node(st) ? teexec_status_node(st) : "(none)");
    /* A program would act on the code; this one checks the details, so CI
     * notices if a status stops naming its file or node. */
    if (!st || (want_file && !teexec_status_file(st)) || (want_node && !teexec_status_node(st))) {
        printf("  ^ expected an error%s%s\n", want_file ? " naming the file" : "",
               want_node ? " and the node" : "");
        (*bad)++;
    }
    teexec_status_destroy(st);
    return code;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: log_callback MODEL.onnx\n");
        return 2;
    }
    int rc = 1, bad = 0, messages = 0;
    teexec_model *model = NULL, *missing = NULL;
    teexec_session_options *options = NULL;
    teexec_session *session = NULL;
    teexec_tensor *floats = NULL, *ids = NULL;
    teexec_tensor **outputs = NULL;
    size_t n_out = 0;

    /* Install the callback before using the library from any thread. */
    teexec_set_log_callback(on_log, &messages, TEEXEC_LOG_DEBUG);

    /* 1. A file that is not there. On failure the out-parameter is NULL. */
    if (report("loading a missing file",
               teexec_model_load_file("no/such/model.onnx", NULL, &missing), 1, 0, &bad) !=
            TEEXEC_ERR_IO ||
        missing)
        bad++;

    /* The real model, and a CPU session over it (these must work). */
    teexec_status *st = teexec_model_load_file(argv[1], NULL, &model);
    if (!st) st = teexec_session_options_create(&options);
    if (!st) st = teexec_session_options_set_device(options, TEEXEC_DEVICE_CPU);
    if (!st) st = teexec_session_create(model, options, &session);
    if (st) {
        report("setting up", st, 0, 0, &bad);
        goto done;
    }
    const teexec_value_info *in = teexec_model_input(model, 0);
    if (!in || in->dtype != TEEXEC_DTYPE_INT64 || in->rank < 1) {
        fprintf(stderr, "log_callback: the first input must hold int64 token ids\n");
        goto done;
    }
    int64_t dims[32];
    for (int32_t d = 0; d < in->rank; d++) dims[d] = in->dims[d] >= 0 ? in->dims[d] : 1;
    n_out = teexec_model_output_count(model);
    outputs = calloc(n_out + 1, sizeof *outputs);
    if (!outputs) goto done;

    /* 2. The right shape but the wrong dtype: refused before any work, and
     * every output slot is left NULL. */
    st = teexec_tensor_create(TEEXEC_DTYPE_FLOAT, in->rank, dims, &floats);
    if (st) {
        report("creating a tensor", st, 0, 0, &bad);
        goto done;
    }
    const teexec_tensor *arg = floats;
    report("running on float token ids",
           teexec_session_run(session, 1, &in->name, &arg, n_out, NULL, outputs), 1, 0, &bad);
    for (size_t i = 0; i < n_out; i++)
        if (outputs[i]) bad++;

    /* 3. Token ids are zero (a valid id) except one far past any
     * vocabulary: only the embedding node can tell, and its status names
     * it. */
    st = teexec_tensor_create(TEEXEC_DTYPE_INT64, in->rank, dims, &ids);
    if (st) {
        report("creating a tensor", st, 0, 0, &bad);
        goto done;
    }
    ((int64_t *)teexec_tensor_data(ids))[teexec_tensor_element_count(ids) - 1] = 1000000000;
    arg = ids;
    report("running on an out-of-vocabulary token id",
           teexec_session_run(session, 1, &in->name, &arg, n_out, NULL, outputs), 1, 1, &bad);
    for (size_t i = 0; i < n_out; i++)
        if (outputs[i]) bad++;

    printf("the log callback received %d message%s\n", messages, messages == 1 ? "" : "s");
    rc = bad ? 1 : 0;

done:
    for (size_t i = 0; outputs && i < n_out; i++) teexec_tensor_destroy(outputs[i]);
    free(outputs);
    teexec_tensor_destroy(ids);
    teexec_tensor_destroy(floats);
    teexec_session_destroy(session);
    teexec_session_options_destroy(options);
    teexec_model_destroy(model);
    /* Uninstall: `messages` is about to go out of scope. */
    teexec_set_log_callback(NULL, NULL, TEEXEC_LOG_ERROR);
    return rc;
}
