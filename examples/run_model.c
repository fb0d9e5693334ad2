/*
 * run_model.c - the smallest complete program over libteexec: load an ONNX
 * model, print its inputs, run it once on the CPU on inputs read from .npy
 * files, print the outputs' dtypes and shapes.
 *
 *   run_model MODEL.onnx NAME=FILE.npy [NAME=FILE.npy ...]
 *   run_model models/mlp/model.onnx x=models/mlp/inputs/x.npy
 *
 * Build it against an installed libteexec with
 *
 *   cc run_model.c $(pkg-config --cflags --libs teexec) -o run_model
 *
 * The pattern every teexec program follows: a call that can fail returns a
 * teexec_status pointer, NULL on success; a non-NULL status belongs to the
 * caller, who reads it and destroys it. Handles are released once, at the
 * end, whether the program got there by success or by failure: every
 * destroy function accepts NULL, and a failed create leaves its
 * out-parameter NULL, so one cleanup block serves every path.
 */
#include <teexec/teexec.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reports a failed call and releases its status. Returns 1 when `st` was an
 * error, so calls read `if (failed(call(...), "what")) goto done;`. */
static int failed(teexec_status *st, const char *what)
{
    if (!st) return 0;
    fprintf(stderr, "run_model: %s: %s", what, teexec_status_message(st));
    if (teexec_status_file(st)) fprintf(stderr, " (file %s)", teexec_status_file(st));
    if (teexec_status_node(st)) fprintf(stderr, " (node %s)", teexec_status_node(st));
    fprintf(stderr, " [%s]\n", teexec_code_name(teexec_status_code(st)));
    teexec_status_destroy(st);
    return 1;
}

/* Prints "[2, seq, 64]": fixed extents as numbers, symbolic ones by name,
 * unknown ones as "?". dim_params may be NULL (a tensor's own shape). */
static void print_shape(int32_t rank, const int64_t *dims, const char *const *dim_params)
{
    if (rank < 0) {
        printf("(unknown rank)");
        return;
    }
    printf("[");
    for (int32_t d = 0; d < rank; d++) {
        if (d) printf(", ");
        if (dims[d] >= 0)
            printf("%lld", (long long)dims[d]);
        else
            printf("%s", dim_params && dim_params[d] ? dim_params[d] : "?");
    }
    printf("]");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: run_model MODEL.onnx NAME=FILE.npy [NAME=FILE.npy ...]\n");
        return 2;
    }
    /* A program built against one header may meet a newer shared library:
     * the major version is the one that must agree. */
    if (teexec_version() >> 16 != TEEXEC_VERSION_MAJOR) {
        fprintf(stderr, "run_model: libteexec %s does not match this program's header\n",
                teexec_version_string());
        return 1;
    }
    printf("libteexec %s\n", teexec_version_string());

    int rc = 1;
    size_t n_inputs = (size_t)(argc - 2), n_outputs = 0;
    teexec_model *model = NULL;
    teexec_session_options *options = NULL;
    teexec_session *session = NULL;
    const char **input_names = calloc(n_inputs + 1, sizeof *input_names);
    teexec_tensor **inputs = calloc(n_inputs + 1, sizeof *inputs);
    teexec_tensor **outputs = NULL;
    if (!input_names || !inputs) {
        fprintf(stderr, "run_model: out of memory\n");
        goto done;
    }

    /* Loading parses and validates the whole file (budgets: NULL options =
     * the defaults) and lowers the graph once for every session. */
    if (failed(teexec_model_load_file(argv[1], NULL, &model), "loading the model")) goto done;

    /* Introspection: the strings and arrays belong to the model. */
    for (size_t i = 0; i < teexec_model_input_count(model); i++) {
        const teexec_value_info *in = teexec_model_input(model, i);
        printf("input %s: %s ", in->name, teexec_dtype_name(in->dtype));
        print_shape(in->rank, in->dims, in->dim_params);
        printf("\n");
    }

    /* One input tensor per NAME=FILE argument. The names point into argv,
     * the tensors are ours until teexec_tensor_destroy. */
    for (size_t i = 0; i < n_inputs; i++) {
        char *arg = argv[2 + i], *eq = strchr(arg, '=');
        if (!eq) {
            fprintf(stderr, "run_model: \"%s\" is not NAME=FILE.npy\n", arg);
            goto done;
        }
        *eq = '\0';
        input_names[i] = arg;
        if (failed(teexec_tensor_load_file(eq + 1, &inputs[i]), "reading an input")) goto done;
    }

    /* A CPU session: every node gets its kernel and every buffer is planned
     * here, so a model the CPU cannot run fails now, not in the first run.
     * The session copies what it needs from the options. */
    if (failed(teexec_session_options_create(&options), "session options") ||
        failed(teexec_session_options_set_device(options, TEEXEC_DEVICE_CPU), "device") ||
        failed(teexec_session_create(model, options, &session), "creating the session"))
        goto done;

    /* Run once; output_names NULL asks for every output in model order.
     * Each output is a new tensor we own. */
    n_outputs = teexec_model_output_count(model);
    outputs = calloc(n_outputs + 1, sizeof *outputs);
    if (!outputs) {
        fprintf(stderr, "run_model: out of memory\n");
        goto done;
    }
    if (failed(teexec_session_run(session, n_inputs, input_names,
                                  (const teexec_tensor *const *)inputs, n_outputs, NULL, outputs),
               "running the model"))
        goto done;

    for (size_t i = 0; i < n_outputs; i++) {
        const teexec_tensor *out = outputs[i];
        printf("output %s: %s ", teexec_model_output(model, i)->name,
               teexec_dtype_name(teexec_tensor_dtype(out)));
        print_shape(teexec_tensor_rank(out), teexec_tensor_dims(out), NULL);
        /* The data is plain C-order memory; float outputs are C floats. */
        if (teexec_tensor_dtype(out) == TEEXEC_DTYPE_FLOAT) {
            const float *v = teexec_tensor_data_const(out);
            uint64_t n = teexec_tensor_element_count(out);
            double sum = 0;
            for (uint64_t k = 0; k < n; k++) sum += v[k];
            printf(" mean %.6g", n ? sum / (double)n : 0.0);
        }
        printf("\n");
    }
    rc = 0;

done:
    /* Sessions before the model they run; everything else in any order. */
    for (size_t i = 0; outputs && i < n_outputs; i++) teexec_tensor_destroy(outputs[i]);
    free(outputs);
    teexec_session_destroy(session);
    teexec_session_options_destroy(options);
    for (size_t i = 0; inputs && i < n_inputs; i++) teexec_tensor_destroy(inputs[i]);
    free(inputs);
    free(input_names);
    teexec_model_destroy(model);
    return rc;
}
