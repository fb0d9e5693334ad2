/*
 * train.c - fine-tune a model on the CPU: 10 AdamW steps over batches of a
 * .npz file, print the losses, save the trained model, load it back and
 * check that it holds the trained parameters and runs.
 *
 *   train MODEL.onnx DATA.npz OUT.onnx
 *   train models/zoo/gpt2_dynamo/model.onnx models/zoo/gpt2_dynamo/train.npz /tmp/gpt2.onnx
 *
 * DATA.npz holds one array per model input plus "labels" (int64 class ids
 * for a cross-entropy loss over the first output's last dim), all with the
 * same number of rows; step s trains on the batch of rows that starts at
 * (s * batch) mod rows, the batch being the first input's first dim.
 */
#include <teexec/teexec.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 10
#define MAX_ARRAYS 16

static int failed(teexec_status *st, const char *what)
{
    if (!st) return 0;
    fprintf(stderr, "train: %s: %s", what, teexec_status_message(st));
    if (teexec_status_node(st)) fprintf(stderr, " (node %s)", teexec_status_node(st));
    fprintf(stderr, " [%s]\n", teexec_code_name(teexec_status_code(st)));
    teexec_status_destroy(st);
    return 1;
}

/* One batch: `rows` rows from `first` of every array in the dataset, as
 * new tensors named like the arrays. The dataset keeps its own tensors;
 * the batch's copies are ours. */
typedef struct batch {
    size_t n;
    const char *names[MAX_ARRAYS];
    teexec_tensor *tensors[MAX_ARRAYS];
} batch;

static void batch_free(batch *b)
{
    for (size_t i = 0; i < b->n; i++) teexec_tensor_destroy(b->tensors[i]);
    b->n = 0;
}

static teexec_status *batch_make(const teexec_dataset *data, int64_t first, int64_t rows,
                                 batch *b)
{
    b->n = 0;
    for (size_t i = 0; i < teexec_dataset_count(data) && i < MAX_ARRAYS; i++) {
        const teexec_tensor *all = teexec_dataset_tensor(data, i);
        int32_t rank = teexec_tensor_rank(all);
        int64_t dims[32];
        memcpy(dims, teexec_tensor_dims(all), (size_t)rank * sizeof dims[0]);
        size_t row_bytes = teexec_tensor_byte_size(all) / (size_t)dims[0];
        dims[0] = rows;
        const char *src = (const char *)teexec_tensor_data_const(all) + (size_t)first * row_bytes;
        teexec_status *st = teexec_tensor_create_copy(teexec_tensor_dtype(all), rank, dims, src,
                                                      (size_t)rows * row_bytes, &b->tensors[b->n]);
        if (st) return st;
        b->names[b->n++] = teexec_dataset_name(data, i);
    }
    return NULL;
}

/* The trained parameters must come back from the saved file exactly: a
 * trainer over the reloaded model reads them as its starting values. */
static int same_params(const teexec_trainer *trained, const teexec_trainer *reloaded)
{
    size_t n = teexec_trainer_param_count(trained), differ = 0;
    if (teexec_trainer_param_count(reloaded) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = teexec_trainer_param_name(trained, i);
        teexec_tensor *a = NULL, *b = NULL;
        if (failed(teexec_trainer_param(trained, name, &a), name) ||
            failed(teexec_trainer_param(reloaded, name, &b), name) ||
            teexec_tensor_byte_size(a) != teexec_tensor_byte_size(b) ||
            memcmp(teexec_tensor_data_const(a), teexec_tensor_data_const(b),
                   teexec_tensor_byte_size(a)) != 0)
            differ++;
        teexec_tensor_destroy(a);
        teexec_tensor_destroy(b);
    }
    printf("%zu trained parameters, %zu differ after the round trip\n", n, differ);
    return differ == 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: train MODEL.onnx DATA.npz OUT.onnx\n");
        return 2;
    }
    int rc = 1;
    teexec_model *model = NULL, *saved = NULL;
    teexec_dataset *data = NULL;
    teexec_trainer *trainer = NULL, *check = NULL;
    teexec_session *session = NULL;
    teexec_tensor **outputs = NULL;
    batch b = {0};

    if (failed(teexec_model_load_file(argv[1], NULL, &model), "loading the model") ||
        failed(teexec_dataset_load_npz(argv[2], &data), "loading the data"))
        goto done;
    const teexec_value_info *in0 = teexec_model_input(model, 0);
    if (!in0 || in0->rank < 1 || in0->dims[0] < 1 || teexec_dataset_count(data) == 0) {
        fprintf(stderr, "train: the model needs a first input with a fixed batch dim\n");
        goto done;
    }
    int64_t rows_per_batch = in0->dims[0];
    int64_t rows = teexec_tensor_dims(teexec_dataset_tensor(data, 0))[0];

    /* Options are a plain struct: init fills the defaults, then we change
     * what we need. The trainer copies them. */
    teexec_train_options opt;
    teexec_train_options_init(&opt);
    opt.loss = TEEXEC_LOSS_CROSS_ENTROPY; /* reads the "labels" array */
    opt.optimizer = TEEXEC_OPTIMIZER_ADAMW;
    opt.lr = 1e-3;
    opt.weight_decay = 0.01;
    opt.device = TEEXEC_DEVICE_CPU;
    if (failed(teexec_trainer_create(model, &opt, &trainer), "creating the trainer")) goto done;
    printf("training %zu parameters of %s\n", teexec_trainer_param_count(trainer), argv[1]);

    double first_loss = 0, loss = 0;
    for (int s = 0; s < STEPS; s++) {
        /* the tensors are only read during the step: free them after */
        if (failed(batch_make(data, (s * rows_per_batch) % rows, rows_per_batch, &b), "batch") ||
            failed(teexec_trainer_step(trainer, b.n, b.names,
                                       (const teexec_tensor *const *)b.tensors, &loss),
                   "step"))
            goto done;
        batch_free(&b);
        printf("step %d loss %.6f\n", s, loss);
        if (s == 0) first_loss = loss;
    }
    if (!(loss < first_loss)) {
        fprintf(stderr, "train: the loss did not go down (%.6f -> %.6f)\n", first_loss, loss);
        goto done;
    }

    /* The saved file is the user's model with the trained values in place
     * of its initializers, written atomically. */
    if (failed(teexec_trainer_save_model(trainer, argv[3]), "saving")) goto done;
    printf("saved %s\n", argv[3]);

    /* Load it back: the parameters match, and it runs. */
    if (failed(teexec_model_load_file(argv[3], NULL, &saved), "reloading") ||
        failed(teexec_trainer_create(saved, &opt, &check), "a trainer over the saved model"))
        goto done;
    if (!same_params(trainer, check)) goto done;

    teexec_session_options *so = NULL;
    if (failed(teexec_session_options_create(&so), "session options")) goto done;
    teexec_status *st = teexec_session_options_set_device(so, TEEXEC_DEVICE_CPU);
    if (!st) st = teexec_session_create(saved, so, &session);
    teexec_session_options_destroy(so);
    if (failed(st, "a session over the saved model")) goto done;

    /* run it on the first batch's inputs (the model inputs of the batch;
     * "labels" is not one of them, so give only the inputs) */
    size_t n_out = teexec_model_output_count(saved);
    outputs = calloc(n_out + 1, sizeof *outputs);
    const char *names[MAX_ARRAYS];
    const teexec_tensor *tensors[MAX_ARRAYS];
    size_t n_in = 0;
    if (!outputs || failed(batch_make(data, 0, rows_per_batch, &b), "batch")) goto done;
    for (size_t i = 0; i < b.n; i++)
        for (size_t k = 0; k < teexec_model_input_count(saved); k++)
            if (strcmp(b.names[i], teexec_model_input(saved, k)->name) == 0) {
                names[n_in] = b.names[i];
                tensors[n_in++] = b.tensors[i];
            }
    if (failed(teexec_session_run(session, n_in, names, tensors, n_out, NULL, outputs),
               "running the saved model"))
        goto done;
    printf("the saved model runs: %s has %llu elements\n", teexec_model_output(saved, 0)->name,
           (unsigned long long)teexec_tensor_element_count(outputs[0]));
    rc = 0;

done:
    for (size_t i = 0; outputs && i < teexec_model_output_count(saved); i++)
        teexec_tensor_destroy(outputs[i]);
    free(outputs);
    batch_free(&b);
    teexec_session_destroy(session);
    teexec_trainer_destroy(check);
    teexec_trainer_destroy(trainer);
    teexec_dataset_destroy(data);
    teexec_model_destroy(saved);
    teexec_model_destroy(model);
    return rc;
}
